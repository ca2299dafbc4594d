package kstreamtest.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.ArrayList;
import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

/**
 * Stands in for the bean that the apicurio-common-app-components-config-index extension
 * generates at build time (its deployment module is not on Maven Central): no property is
 * changeable at run time, every one keeps its configured value.
 */
public class NoDynamicConfig {
    @Produces
    @Singleton
    DynamicConfigPropertyList dynamicConfigProperties() {
        return new DynamicConfigPropertyList(new ArrayList<>());
    }
}
